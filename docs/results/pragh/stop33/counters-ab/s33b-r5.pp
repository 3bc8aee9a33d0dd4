   0.1s pingpong   366.1 ns/round  contended fetch_add   10.3 ns/op
   1.1s pingpong   349.0 ns/round  contended fetch_add   10.3 ns/op
