   0.0s pingpong    78.6 ns/round  contended fetch_add   10.9 ns/op
   1.0s pingpong   130.1 ns/round  contended fetch_add   10.8 ns/op
