   0.1s pingpong   406.0 ns/round  contended fetch_add   10.4 ns/op
