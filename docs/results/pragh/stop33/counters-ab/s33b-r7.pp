   0.0s pingpong    99.4 ns/round  contended fetch_add   10.1 ns/op
   1.0s pingpong   137.3 ns/round  contended fetch_add   11.4 ns/op
