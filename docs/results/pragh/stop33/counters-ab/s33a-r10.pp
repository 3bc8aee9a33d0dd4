   0.0s pingpong    85.8 ns/round  contended fetch_add   11.0 ns/op
   1.0s pingpong   149.0 ns/round  contended fetch_add   11.1 ns/op
