   0.1s pingpong   140.5 ns/round  contended fetch_add   11.7 ns/op
   1.0s pingpong   159.4 ns/round  contended fetch_add   12.4 ns/op
