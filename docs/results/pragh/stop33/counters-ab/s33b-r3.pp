   0.0s pingpong    92.0 ns/round  contended fetch_add   10.9 ns/op
   1.0s pingpong   130.7 ns/round  contended fetch_add   10.8 ns/op
