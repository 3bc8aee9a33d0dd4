   0.1s pingpong   434.0 ns/round  contended fetch_add   10.4 ns/op
