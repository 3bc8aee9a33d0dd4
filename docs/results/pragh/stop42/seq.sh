#!/usr/bin/env bash
LOCUS_DIAG_SPLIT=nowalk ./locus-diag5 bench pragh uniform --preset quick --schemes Orig,Split --runs 20 --out uni-nowalk-20 > uni-nowalk-20.log 2>&1
./locus-new bench pragh uniform --preset quick --schemes Orig,Split --runs 20 --out uni-new-20b > uni-new-20b.log 2>&1
LOCUS_DIAG_SPLIT=nodriver ./locus-diag5 bench pragh uniform --preset quick --schemes Orig,Split --runs 20 --out uni-nodriver-20b > uni-nodriver-20b.log 2>&1
