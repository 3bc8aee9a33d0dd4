   0.1s pingpong   174.2 ns/round  contended fetch_add   13.1 ns/op
   1.0s pingpong   147.6 ns/round  contended fetch_add    5.3 ns/op
