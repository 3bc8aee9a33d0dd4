   0.0s pingpong    99.9 ns/round  contended fetch_add   11.8 ns/op
   1.0s pingpong   102.9 ns/round  contended fetch_add   12.9 ns/op
