   0.1s pingpong   396.4 ns/round  contended fetch_add    5.4 ns/op
   1.1s pingpong   338.9 ns/round  contended fetch_add   10.3 ns/op
