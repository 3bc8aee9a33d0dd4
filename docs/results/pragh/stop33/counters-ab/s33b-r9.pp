   0.0s pingpong    95.2 ns/round  contended fetch_add   10.2 ns/op
   1.0s pingpong   142.3 ns/round  contended fetch_add   11.8 ns/op
