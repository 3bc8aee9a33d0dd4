   0.1s pingpong   439.9 ns/round  contended fetch_add    5.4 ns/op
   1.1s pingpong   348.9 ns/round  contended fetch_add   10.5 ns/op
