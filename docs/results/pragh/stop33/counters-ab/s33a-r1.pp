   0.1s pingpong   446.2 ns/round  contended fetch_add   10.3 ns/op
