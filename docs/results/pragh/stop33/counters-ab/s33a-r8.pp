   0.1s pingpong   152.4 ns/round  contended fetch_add   10.1 ns/op
   1.0s pingpong   137.9 ns/round  contended fetch_add   12.8 ns/op
