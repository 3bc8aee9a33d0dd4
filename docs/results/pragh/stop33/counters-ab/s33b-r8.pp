   0.1s pingpong   152.3 ns/round  contended fetch_add   12.8 ns/op
   1.0s pingpong    91.0 ns/round  contended fetch_add    5.4 ns/op
