   0.1s pingpong   367.0 ns/round  contended fetch_add   10.2 ns/op
   1.1s pingpong   361.3 ns/round  contended fetch_add   10.2 ns/op
