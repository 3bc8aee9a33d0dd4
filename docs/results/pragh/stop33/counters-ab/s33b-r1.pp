   0.1s pingpong   387.9 ns/round  contended fetch_add   10.5 ns/op
   1.1s pingpong   347.3 ns/round  contended fetch_add    5.3 ns/op
