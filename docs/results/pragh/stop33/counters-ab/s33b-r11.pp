   0.0s pingpong    92.3 ns/round  contended fetch_add   11.2 ns/op
   1.0s pingpong    85.5 ns/round  contended fetch_add    5.3 ns/op
