// An outside program embedding Tandem through its installed headers and
// pkg-config file (scripts/check-embed.sh builds and runs it).
#include <tandem/tandem.h>

#include <iostream>

int main() {
  using namespace tandem;
  manual_seed(7);
  Tensor a = arange(6, kFloat32).reshape({2, 3});
  Tensor b = ones({3, 2});
  Tensor c = a.matmul(b);
  std::cout << "tandem " << version() << "\n" << c << "\n";
  return c.sum().item<double>() == 30.0 ? 0 : 1;
}
