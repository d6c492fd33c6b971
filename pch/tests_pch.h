// The precompiled header of the test binaries (tests/meson.build): what
// nearly every test file includes, parsed once per binary instead of once
// per file. Catch2 and tandem.h took about 2.2 s of the 4 s a test file
// took to compile. A test file still includes what it uses: this header
// only makes that cheap (a build with -Db_pch=false checks that it does).

#include <algorithm>
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

#include <catch2/catch.hpp>

#include "tandem/tandem.h"
#include "tests/helpers.h"
