   0.1s pingpong   418.2 ns/round  contended fetch_add    5.4 ns/op
   1.1s pingpong   341.3 ns/round  contended fetch_add   10.6 ns/op
