   0.0s pingpong    85.4 ns/round  contended fetch_add   12.9 ns/op
   1.0s pingpong    91.4 ns/round  contended fetch_add    5.3 ns/op
