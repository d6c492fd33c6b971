#!/bin/sh
# tandem_path.cpp: the flags meson gives kernels/cpu/linalg.cpp (build/compile_commands.json), no -march.
set -e
cd "$(dirname "$0")"
OB=-I/usr/include/x86_64-linux-gnu/openblas-pthread/
g++ $OB -std=c++20 -O2 -g -fno-math-errno -g1 -fPIC -fopenmp -pthread -Wall -Wextra -c tandem_path.cpp -o tandem_path.o
g++ $OB -std=c++20 -O2 -g1 -fopenmp -pthread -Wall -c bench.cpp -o bench.o
g++ -fopenmp -pthread bench.o tandem_path.o -o bench -lopenblas -ldnnl
