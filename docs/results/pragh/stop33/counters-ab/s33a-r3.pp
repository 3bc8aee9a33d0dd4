   0.1s pingpong   414.0 ns/round  contended fetch_add    5.4 ns/op
   1.1s pingpong   338.3 ns/round  contended fetch_add   10.4 ns/op
