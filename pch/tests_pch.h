// The precompiled header of the test binaries (tests/meson.build): what
// nearly every test file includes, parsed once per binary instead of once
// per file: parsing Catch2 and tandem.h takes about 2.2 s of CPU, and a
// test file compiles about 1 s faster with this header. A test file still
// includes what it uses: this header only makes that cheap (a build with
// -Db_pch=false checks that it does).

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tandem/tandem.h"
#include "tests/helpers.h"
