// A program outside the pmds tree, built against an installed pmds (test/install/run.sh): it
// creates a durable set in a pool file, closes it, and opens it again.
#include <cstdio>
#include <pmds/pmds.hpp>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  {
    auto set = pmds::open_or_create<pmds::SoftHashSet>(argv[1], 64u << 20);
    if (set.recovered() || !set->insert(7, 49)) return 1;
  }
  auto set = pmds::open_or_create<pmds::SoftHashSet>(argv[1], 64u << 20);
  if (!set.recovered() || set->get(7) != 49u) return 1;
  std::puts("consumer: ok");
  return 0;
}
