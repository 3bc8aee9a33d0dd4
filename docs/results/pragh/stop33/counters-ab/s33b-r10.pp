   0.1s pingpong   144.4 ns/round  contended fetch_add   11.1 ns/op
   1.0s pingpong   150.2 ns/round  contended fetch_add   11.2 ns/op
