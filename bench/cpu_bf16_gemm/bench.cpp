// bfloat16 GEMM on the CPU: Tandem's conversion around OpenBLAS sgemm (a), the
// same with a better conversion loop (a'), oneDNN's gemm_bf16bf16f32 (b) and
// oneDNN's matmul primitive with a bfloat16 destination (b2), timed interleaved
// against float32 sgemm on the same values, for the shapes of Tandem's MLP and
// CNN training steps. Build: see build.sh. Usage: ./bench [--quick] [--threads 1,2]
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "tandem_path.h"

// Exported by libdnnl.so.2.6 but declared only in oneDNN's own tests (not in dnnl.h).
// Row-major like dnnl_sgemm. Returns dnnl_unimplemented below AVX-512 (avx512_core).
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K,
                                               float alpha, const uint16_t* A, dnnl_dim_t lda, const uint16_t* B,
                                               dnnl_dim_t ldb, float beta, float* C, dnnl_dim_t ldc);
extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);

using Clock = std::chrono::steady_clock;
static double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

static uint16_t to_bf16(float f) {  // round to nearest even, no nan here
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
static float from_bf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static std::mt19937 rng(12345);
static std::vector<uint16_t> random_bf16(size_t n) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = to_bf16(d(rng));
  return v;
}
static std::vector<float> widen(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = from_bf16(v[i]);
  return f;
}

static void check_dnnl(dnnl_status_t st, const char* what) {
  if (st != dnnl_success) {
    printf("FAIL %s: oneDNN status %d\n", what, static_cast<int>(st));
    fflush(stdout);
    exit(3);
  }
}

// Errors of a computed (rows x cols, ld) matrix against a float64 reference:
// normwise max|c - r| / max|r|, and the largest elementwise |c - r| / |r| over
// entries with |r| >= 1e-3 max|r| (smaller ones are cancellation noise).
struct Err {
  double norm = 0, elem = 0;
};
template <typename Get>
static Err errors(int64_t rows, int64_t cols, const std::vector<double>& ref, Get get) {
  double maxr = 0;
  for (double r : ref) maxr = std::max(maxr, std::fabs(r));
  Err e;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double r = ref[i * cols + j], c = get(i, j), d = std::fabs(c - r);
      if (!std::isfinite(c)) d = INFINITY;
      e.norm = std::max(e.norm, d / maxr);
      if (std::fabs(r) >= 1e-3 * maxr) e.elem = std::max(e.elem, d / std::fabs(r));
    }
  return e;
}

// ---------------------------------------------------------------- timing

struct Method {
  std::string name;
  std::function<void()> run;
};

static double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static bool g_dnnl_gemm_ok = true;  // dnnl_gemm_bf16bf16f32 implemented for this ISA

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Times every method `reps` times, interleaved (the order rotates each rep), each
// timing `inner` back-to-back calls; methods[0] is the float32 baseline. Prints one
// RES line per method: median seconds per call, median of the per-rep ratios to
// the baseline, and the min and max of those ratios.
static void time_methods(const std::string& tag, int threads, std::vector<Method>& methods, int reps, double target_s) {
  for (auto& m : methods) m.run();  // warm-up (page faults, packing buffers, JIT)
  double t0 = now();
  methods[0].run();
  double one = now() - t0;
  int inner = std::clamp(static_cast<int>(std::ceil(target_s / std::max(one, 1e-9))), 1, 100000);
  size_t nm = methods.size();
  std::vector<std::vector<double>> t(nm), tc(nm);
  for (int r = 0; r < reps; ++r) {
    for (size_t q = 0; q < nm; ++q) {
      size_t k = (q + r) % nm;
      double s = now(), sc = cpu_now();
      for (int i = 0; i < inner; ++i) methods[k].run();
      double e = now(), ec = cpu_now();
      t[k].push_back((e - s) / inner);
      tc[k].push_back((ec - sc) / inner);
    }
  }
  // wall-clock ratios; cpu_ratio: the same with the process's CPU time (all its
  // threads), less sensitive to other processes at T=1 (at T=2 it counts spinning).
  for (size_t k = 0; k < nm; ++k) {
    std::vector<double> ratio, cratio;
    for (int r = 0; r < reps; ++r) {
      ratio.push_back(t[k][r] / t[0][r]);
      cratio.push_back(tc[k][r] / tc[0][r]);
    }
    auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
    printf("RES %-28s T=%d %-14s median_us %12.1f ratio %6.3f  [%5.3f %5.3f]  cpu_ratio %6.3f  inner %d reps %d\n",
           tag.c_str(), threads, methods[k].name.c_str(), median(t[k]) * 1e6, median(ratio), *lo, *hi, median(cratio),
           inner, reps);
  }
  fflush(stdout);
}

// ---------------------------------------------------------------- MLP GEMMs

struct MlpCase {
  std::string name;
  int64_t M, N, K;
  bool a_t, b_t;  // A stored as its transpose (K x M row-major), B likewise (N x K)
};

static void run_mlp(const MlpCase& c, int threads, int reps, double target_s, bool check) {
  const int64_t M = c.M, N = c.N, K = c.K;
  auto a16 = random_bf16(M * K), b16 = random_bf16(K * N);
  auto a32 = widen(a16), b32 = widen(b16);
  BfOperand A{a16.data(), c.a_t ? 1 : K, c.a_t ? M : 1}, B{b16.data(), c.b_t ? 1 : N, c.b_t ? K : 1};
  const int64_t lda = c.a_t ? M : K, ldb = c.b_t ? K : N;
  const char ta = c.a_t ? 'T' : 'N', tb = c.b_t ? 'T' : 'N';

  std::vector<float> cs(M * N), cb32(M * N), cf(M * N);
  std::vector<uint16_t> ca(M * N), ca2(M * N), cb(M * N), cp(M * N), cconv(M * N);
  for (auto& x : cf) x = 0.37f;
  TScratch sa, sa2, sc, sc2;

  // (b2) oneDNN matmul primitive, bf16 x bf16 -> bf16, operands described by their strides.
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  memory::desc amd({M, K}, memory::data_type::bf16, memory::dims{A.rs, A.cs});
  memory::desc bmd({K, N}, memory::data_type::bf16, memory::dims{B.rs, B.cs});
  memory::desc cmd({M, N}, memory::data_type::bf16, memory::dims{N, 1});
  double tc = now();
  matmul prim;
  bool prim_ok = false;
  try {
    matmul::primitive_desc pd(matmul::desc(amd, bmd, cmd), eng);
    prim = matmul(pd);
    tc = now() - tc;
    printf("INFO %s T=%d matmul impl %s, created in %.3f ms\n", c.name.c_str(), threads, pd.impl_info_str(), tc * 1e3);
    prim_ok = std::string(pd.impl_info_str()).rfind("ref", 0) != 0;  // skip the reference implementation
  } catch (const dnnl::error& e) {
    printf("INFO %s T=%d matmul bf16: no implementation on this ISA (%s)\n", c.name.c_str(), threads, e.what());
  }
  memory am(amd, eng, a16.data()), bm(bmd, eng, b16.data()), cm(cmd, eng, cp.data());

  std::vector<Method> ms = {
      {"sgemm_f32",
       [&] {
         cblas_sgemm(CblasRowMajor, c.a_t ? CblasTrans : CblasNoTrans, c.b_t ? CblasTrans : CblasNoTrans, M, N, K, 1.f,
                     a32.data(), lda, b32.data(), ldb, 0.f, cs.data(), N);
       }},
      {"a_tandem", [&] { tandem_gemm_bf16(M, N, K, A, B, ca.data(), N, sa); }},
      {"a2_betterconv", [&] { better_gemm_bf16(M, N, K, A, B, ca2.data(), N, sa2); }},
      {"b_dnnl_gemm",
       [&] {
         check_dnnl(dnnl_gemm_bf16bf16f32(ta, tb, M, N, K, 1.f, a16.data(), lda, b16.data(), ldb, 0.f, cb32.data(), N),
                    "gemm_bf16bf16f32");
         f32_to_bf16(cb32.data(), cb.data(), M * N);
       }},
      {"b2_dnnl_matmul",
       [&] {
         prim.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
         strm.wait();
       }},
      {"conv_only_a", [&] { tandem_convert_only(M, N, K, A, B, cf.data(), cconv.data(), N, sc); }},
      {"conv_only_a2", [&] { better_convert_only(M, N, K, A, B, cf.data(), cconv.data(), N, sc2); }},
  };
  std::erase_if(ms, [&](const Method& m) {
    return (m.name == "b_dnnl_gemm" && !g_dnnl_gemm_ok) || (m.name == "b2_dnnl_matmul" && !prim_ok);
  });
  auto has = [&](const char* n) {
    return std::any_of(ms.begin(), ms.end(), [&](const Method& m) { return m.name == n; });
  };
  std::string tag = c.name + " " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                    (c.a_t ? " T" : " N") + (c.b_t ? "T" : "N");
  time_methods(tag, threads, ms, reps, target_s);

  if (check) {
    std::vector<double> ad(a32.begin(), a32.end()), bd(b32.begin(), b32.end()), ref(M * N);
    cblas_dgemm(CblasRowMajor, c.a_t ? CblasTrans : CblasNoTrans, c.b_t ? CblasTrans : CblasNoTrans, M, N, K, 1.0,
                ad.data(), lda, bd.data(), ldb, 0.0, ref.data(), N);
    for (auto& m : ms) m.run();
    auto pr = [&](const char* what, Err e) {
      printf("ERR %-28s T=%d %-22s norm %.3e elem %.3e\n", c.name.c_str(), threads, what, e.norm, e.elem);
    };
    pr("sgemm_f32(f32 out)", errors(M, N, ref, [&](int64_t i, int64_t j) { return (double)cs[i * N + j]; }));
    pr("a_tandem(f32 pre-round)", errors(M, N, ref, [&](int64_t i, int64_t j) { return (double)sa.c[i * N + j]; }));
    if (has("b_dnnl_gemm"))
      pr("b_dnnl(f32 pre-round)", errors(M, N, ref, [&](int64_t i, int64_t j) { return (double)cb32[i * N + j]; }));
    pr("a_tandem(bf16)", errors(M, N, ref, [&](int64_t i, int64_t j) { return (double)from_bf16(ca[i * N + j]); }));
    pr("a2_betterconv(bf16)",
       errors(M, N, ref, [&](int64_t i, int64_t j) { return (double)from_bf16(ca2[i * N + j]); }));
    if (has("b_dnnl_gemm"))
      pr("b_dnnl_gemm(bf16)",
         errors(M, N, ref, [&](int64_t i, int64_t j) { return (double)from_bf16(cb[i * N + j]); }));
    if (has("b2_dnnl_matmul"))
      pr("b2_dnnl_matmul(bf16)",
         errors(M, N, ref, [&](int64_t i, int64_t j) { return (double)from_bf16(cp[i * N + j]); }));
    int64_t same_ab = 0, same_a_a2 = 0, same_ap = 0;
    for (int64_t i = 0; i < M * N; ++i) {
      same_ab += ca[i] == cb[i];
      same_a_a2 += ca[i] == ca2[i];
      same_ap += ca[i] == cp[i];
    }
    printf("SAME %-28s T=%d bf16 outputs identical (fraction): a==a2 %.4f a==b %.4f a==b2 %.4f (-1: not run)\n",
           c.name.c_str(), threads, (double)same_a_a2 / (M * N), has("b_dnnl_gemm") ? (double)same_ab / (M * N) : -1.0,
           has("b2_dnnl_matmul") ? (double)same_ap / (M * N) : -1.0);
  }
  fflush(stdout);
}

// ---------------------------------------------------------------- CNN GEMMs (conv.cpp layout)

// One convolution's GEMMs for a batch of N items as kernels/cpu/conv.cpp runs them:
// per item, fwd (cout, L) = W (cout, K) @ cols (K, L); bwd_in cols (K, L) = W^T @ gy (cout, L);
// bwd_w gw (cout, K) += gy (cout, L) @ cols^T. Items are split over the threads when one
// item's multiply-adds are below 2^18 (each GEMM then single-threaded), else one task and
// OpenBLAS (or oneDNN) threads each GEMM. im2col/col2im and the bias are left out: the
// column matrix is one buffer per task, hot in cache as after im2col (float32 for (a),
// whose im2col converts on the fly; bfloat16 for (b)). Counted: (a) W converted once,
// gy converted per item (as_compute), the output rounded per item (fwd) or at the end
// (bwd_w, partial sums per task added); (b) the same roundings, no input conversion.
struct ConvCase {
  std::string name, kind;  // kind: fwd, bwd_in, bwd_w
  int64_t cout, K, L;
};

static void run_conv(const ConvCase& c, int threads, int reps, double target_s, bool check) {
  const int64_t Nb = 128, cout = c.cout, K = c.K, L = c.L;
  const int64_t macs = cout * K * L;
  const int64_t tasks = macs >= (int64_t{1} << 18) ? 1 : std::min<int64_t>(threads, Nb);
  auto w16 = random_bf16(cout * K), cols16 = random_bf16(K * L), gy16 = random_bf16(Nb * cout * L);
  auto w32 = widen(w16), cols32 = widen(cols16), gy32 = widen(gy16);
  std::vector<uint16_t> y16(Nb * cout * L), gw16(cout * K);
  std::vector<float> y32(Nb * cout * L), gw32(cout * K);
  std::vector<std::vector<float>> task_cols(tasks), task_buf(tasks), partial(tasks);
  std::vector<float> out_last(std::max(cout * L, K * L));  // bwd_in: the last item's column gradient

  auto for_tasks = [&](auto&& body) {
    if (tasks == 1) {
      body(0);
    } else {
#pragma omp parallel for num_threads(tasks) schedule(static, 1)
      for (int64_t t = 0; t < tasks; ++t) body(t);
    }
  };
  auto begin = [&](int64_t t) { return Nb * t / tasks; };
  auto end = [&](int64_t t) { return Nb * (t + 1) / tasks; };

  // mode 0: float32 (Tandem's float path), 1: (a) bf16 through sgemm, 2: (b) oneDNN bf16, 3: (a)'s conversions
  // alone, 4: (a2) = (a) with vectorised conversion loops, 5: (a2)'s conversions alone.
  // Output rounding: (a) and its conversions use conv.cpp's loop; (a2) and (b) the vectorised f32_to_bf16.
  auto run = [&](int mode) {
    const bool sg = mode == 1 || mode == 3 || mode == 4 || mode == 5;  // bf16 through float32
    const bool vec = mode == 4 || mode == 5;
    const bool gemm_on = mode != 3 && mode != 5;
    std::vector<float> wbuf;
    const float* w = w32.data();
    if (sg) {
      if (vec) {
        wbuf.resize(cout * K);
        bf16_to_f32(w16.data(), wbuf.data(), cout * K);
      } else {
        tandem_as_compute(w16.data(), cout * K, wbuf);
      }
      w = wbuf.data();
    }
    for_tasks([&](int64_t t) {
      std::vector<float>& cbuf = task_cols[t];
      std::vector<float>& buf = task_buf[t];
      std::vector<float>& acc = partial[t];
      if (c.kind == "bwd_w") acc.assign(cout * K, 0.f);
      for (int64_t n = begin(t); n < end(t); ++n) {
        const uint16_t* gyn16 = gy16.data() + n * cout * L;
        const float* gyn = gy32.data() + n * cout * L;
        if (c.kind != "fwd" && sg) {
          if (vec) {
            buf.resize(cout * L);
            bf16_to_f32(gyn16, buf.data(), cout * L);
          } else {
            tandem_as_compute(gyn16, cout * L, buf);
          }
          gyn = buf.data();
        }
        if (c.kind == "fwd") {
          if (mode == 0) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cout, L, K, 1.f, w, K, cols32.data(), L, 0.f,
                        y32.data() + n * cout * L, L);
          } else {
            cbuf.resize(cout * L);
            if (mode == 1 || mode == 4)
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cout, L, K, 1.f, w, K, cols32.data(), L, 0.f,
                          cbuf.data(), L);
            if (mode == 2)
              check_dnnl(dnnl_gemm_bf16bf16f32('N', 'N', cout, L, K, 1.f, w16.data(), K, cols16.data(), L, 0.f,
                                               cbuf.data(), L),
                         "conv fwd");
            if (mode == 1 || mode == 3)
              tandem_round_out(cbuf.data(), y16.data() + n * cout * L, cout, L);
            else
              f32_to_bf16(cbuf.data(), y16.data() + n * cout * L, cout * L);
            if (n == Nb - 1) std::copy(cbuf.begin(), cbuf.begin() + cout * L, out_last.begin());
          }
        } else if (c.kind == "bwd_in") {
          cbuf.resize(K * L);
          if (mode == 0 || (sg && gemm_on))
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, L, cout, 1.f, w, K, gyn, L, 0.f, cbuf.data(), L);
          if (mode == 2)
            check_dnnl(dnnl_gemm_bf16bf16f32('T', 'N', K, L, cout, 1.f, w16.data(), K, gyn16, L, 0.f, cbuf.data(), L),
                       "conv bwd_in");
          if (n == Nb - 1 && gemm_on) std::copy(cbuf.begin(), cbuf.begin() + K * L, out_last.begin());
        } else {  // bwd_w
          if (mode == 0 || (sg && gemm_on))
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cout, K, L, 1.f, gyn, L, cols32.data(), L, 1.f,
                        acc.data(), K);
          if (mode == 2)
            check_dnnl(dnnl_gemm_bf16bf16f32('N', 'T', cout, K, L, 1.f, gyn16, L, cols16.data(), L, 1.f, acc.data(), K),
                       "conv bwd_w");
        }
      }
    });
    if (c.kind == "bwd_w") {
      for (int64_t i = 0; i < cout * K; ++i) {
        float s = partial[0][i];
        for (int64_t t = 1; t < tasks; ++t) s += partial[t][i];
        if (mode == 0)
          gw32[i] = s;
        else
          gw16[i] = to_bf16(s);
      }
    }
  };
  std::vector<Method> ms = {{"sgemm_f32", [&] { run(0); }},     {"a_tandem", [&] { run(1); }},
                            {"a2_betterconv", [&] { run(4); }}, {"b_dnnl_gemm", [&] { run(2); }},
                            {"conv_only_a", [&] { run(3); }},   {"conv_only_a2", [&] { run(5); }}};
  if (!g_dnnl_gemm_ok) ms.erase(ms.begin() + 3);
  // conv_only_a is not purely conversions (its GEMMs are skipped, but for bwd_w the
  // partial sums and the final rounding stay, and mode 3 skips the GEMM); it is the
  // non-GEMM work of (a).
  std::string tag = c.name + " " + c.kind + " x128 (" + std::to_string(cout) + "," + std::to_string(K) + "," +
                    std::to_string(L) + ") tasks=" + std::to_string(tasks);
  time_methods(tag, threads, ms, reps, target_s);

  if (check) {
    std::vector<double> wd(w32.begin(), w32.end()), cd(cols32.begin(), cols32.end());
    for (int mode : {1, 4, 2}) {
      if (mode == 2 && !g_dnnl_gemm_ok) continue;
      run(mode);
      Err e;
      if (c.kind == "fwd") {
        std::vector<double> ref(cout * L);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cout, L, K, 1.0, wd.data(), K, cd.data(), L, 0.0,
                    ref.data(), L);
        const uint16_t* yl = y16.data() + (Nb - 1) * cout * L;
        e = errors(cout, L, ref, [&](int64_t i, int64_t j) { return (double)from_bf16(yl[i * L + j]); });
      } else if (c.kind == "bwd_in") {
        std::vector<double> ref(K * L), gd(gy32.begin() + (Nb - 1) * cout * L, gy32.begin() + Nb * cout * L);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, L, cout, 1.0, wd.data(), K, gd.data(), L, 0.0,
                    ref.data(), L);
        e = errors(K, L, ref, [&](int64_t i, int64_t j) { return (double)out_last[i * L + j]; });
      } else {
        std::vector<double> ref(cout * K, 0.0), gd(gy32.begin(), gy32.end());
        for (int64_t n = 0; n < Nb; ++n)
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cout, K, L, 1.0, gd.data() + n * cout * L, L, cd.data(),
                      L, 1.0, ref.data(), K);
        e = errors(cout, K, ref, [&](int64_t i, int64_t j) { return (double)from_bf16(gw16[i * K + j]); });
      }
      printf("ERR %-28s T=%d %-22s norm %.3e elem %.3e\n", (c.name + " " + c.kind).c_str(), threads,
             mode == 1   ? "a_tandem"
             : mode == 4 ? "a2_betterconv"
                         : "b_dnnl_gemm",
             e.norm, e.elem);
    }
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  bool quick = false, check = true;
  std::vector<int> thread_counts = {1, 2};
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--quick") quick = true;
    if (s == "--nocheck") check = false;
    if (s == "--threads" && i + 1 < argc) {
      thread_counts.clear();
      std::string v = argv[++i];
      for (char ch : v)
        if (ch >= '0' && ch <= '9') thread_counts.push_back(ch - '0');
    }
    if (s == "--only" && i + 1 < argc) only = argv[++i];
  }
  {
    std::ifstream la("/proc/loadavg");
    std::string l;
    std::getline(la, l);
    printf("LOAD start %s\n", l.c_str());
  }
  const dnnl_version_t* v = dnnl_version();
  printf("INFO OpenBLAS %s core %s; oneDNN %d.%d.%d cpu_runtime %s, effective isa 0x%x\n", openblas_get_config(),
         openblas_get_corename(), v->major, v->minor, v->patch, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OMP" : "other",
         static_cast<unsigned>(dnnl_get_effective_cpu_isa()));

  {
    uint16_t one = 0x3f80;
    float out = 0;
    dnnl_status_t st = dnnl_gemm_bf16bf16f32('N', 'N', 1, 1, 1, 1.f, &one, 1, &one, 1, 0.f, &out, 1);
    g_dnnl_gemm_ok = st == dnnl_success;
    printf("INFO dnnl_gemm_bf16bf16f32 probe: status %d%s\n", static_cast<int>(st),
           g_dnnl_gemm_ok ? "" : " (unimplemented on this ISA: (b) skipped)");
  }
  std::vector<MlpCase> mlp = {
      {"mlp128 L1 fwd x@W1t", 128, 256, 784, false, true}, {"mlp128 L1 dW x^t@g", 784, 256, 128, true, false},
      {"mlp128 L2 fwd", 128, 128, 256, false, true},       {"mlp128 L2 dX g@W2", 128, 256, 128, false, false},
      {"mlp128 L2 dW", 256, 128, 128, true, false},        {"mlp128 L3 fwd", 128, 10, 128, false, true},
      {"mlp128 L3 dX", 128, 128, 10, false, false},        {"mlp128 L3 dW", 128, 10, 128, true, false},
      {"mlp1024 H1 fwd", 1024, 4096, 784, false, true},    {"mlp1024 H1 dW", 784, 4096, 1024, true, false},
      {"mlp1024 H2 fwd", 1024, 4096, 4096, false, true},   {"mlp1024 H2 dX", 1024, 4096, 4096, false, false},
      {"mlp1024 H2 dW", 4096, 4096, 1024, true, false},
  };
  std::vector<ConvCase> conv = {
      {"conv1", "fwd", 32, 9, 784},      {"conv1", "bwd_w", 32, 9, 784},   {"conv2", "fwd", 64, 288, 196},
      {"conv2", "bwd_in", 64, 288, 196}, {"conv2", "bwd_w", 64, 288, 196},
  };
  for (int T : thread_counts) {
    openblas_set_num_threads(T);
    omp_set_num_threads(T);
    printf("INFO threads %d: openblas_set_num_threads(%d), omp_set_num_threads(%d) (oneDNN's OpenMP runtime)\n", T, T,
           T);
    for (const auto& c : mlp) {
      if (!only.empty() && c.name.find(only) == std::string::npos) continue;
      bool heavy = c.M * c.N * c.K > (int64_t{1} << 30);
      if (quick && heavy) continue;
      run_mlp(c, T, heavy ? 5 : 9, heavy ? 0.0 : 0.03, check);
    }
    for (const auto& c : conv) {
      if (!only.empty() && (c.name + " " + c.kind).find(only) == std::string::npos) continue;
      run_conv(c, T, 7, 0.03, check);
    }
  }
  std::ifstream la("/proc/loadavg");
  std::string l;
  std::getline(la, l);
  printf("LOAD end %s\n", l.c_str());
}
