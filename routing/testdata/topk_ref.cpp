// Reference for the Go routing package: the C++ standard library calls that
// ep_bench makes, driven by jobs read from stdin, one per line. Each job
// prints one line: decimal integers or float bit patterns in hex.
//
//   topk T E K seed       routing table with ep_bench's -1 masking
//   weights rank T K      --validate top-k weights
//   mt seed n             raw std::mt19937 outputs
//   canonical seed n      std::generate_canonical<float, 24> values
//   normal seed n         std::normal_distribution<float>(0, 1) values
//   uniform seed a b n    std::uniform_int_distribution<unsigned>(a, b) values
//   psort seed n k m      partial_sort of n (score = draw % m, index) pairs,
//                         score-only comparison; prints the first k indices
//   logf first step n     logf of the floats with bits first + i*step
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

static uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

static void print_hex(const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); i++) std::printf(i ? " %08x" : "%08x", bits_of(v[i]));
  std::printf("\n");
}

template <typename T>
static void print_ints(const std::vector<T>& v) {
  std::string line;
  for (size_t i = 0; i < v.size(); i++) {
    if (i) line += ' ';
    line += std::to_string(v[i]);
  }
  std::printf("%s\n", line.c_str());
}

// Same calls, same order as ep_bench's generateRandomTopkIndicesLL.
static void topk(unsigned T, unsigned E, unsigned K, unsigned seed) {
  std::vector<int64_t> idx(size_t(T) * K);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::pair<float, int>> score_idx(E);
  for (unsigned t = 0; t < T; t++) {
    for (unsigned e = 0; e < E; e++) {
      float score = std::abs(dist(gen)) + 1.0f;
      score_idx[e] = {score, static_cast<int>(e)};
    }
    std::partial_sort(score_idx.begin(), score_idx.begin() + K, score_idx.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    for (unsigned j = 0; j < K; j++) idx[size_t(t) * K + j] = score_idx[j].second;
  }
  std::uniform_int_distribution<unsigned int> token_dist(0, T - 1);
  std::uniform_int_distribution<unsigned int> slot_dist(0, K - 1);
  for (int i = 0; i < 10; i++) {
    unsigned tok = token_dist(gen);
    unsigned slot = slot_dist(gen);
    idx[size_t(tok) * K + slot] = -1;
  }
  print_ints(idx);
}

// Same calls as ep_bench's initializeValidationData weight loop.
static void weights(int rank, unsigned T, unsigned K) {
  std::vector<float> w(size_t(T) * K);
  std::mt19937 rng(42 + rank);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : w) {
    v = std::abs(normal(rng));
    if (v < 1e-6f) v = 1e-6f;
  }
  print_hex(w);
}

static void psort(unsigned seed, unsigned n, unsigned k, unsigned m) {
  std::mt19937 gen(seed);
  std::vector<std::pair<float, int>> v(n);
  for (unsigned i = 0; i < n; i++) v[i] = {static_cast<float>(gen() % m), static_cast<int>(i)};
  std::partial_sort(v.begin(), v.begin() + k, v.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int> out(k);
  for (unsigned i = 0; i < k; i++) out[i] = v[i].second;
  print_ints(out);
}

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string job;
    in >> job;
    if (job == "topk") {
      unsigned T, E, K, seed;
      in >> T >> E >> K >> seed;
      topk(T, E, K, seed);
    } else if (job == "weights") {
      int rank;
      unsigned T, K;
      in >> rank >> T >> K;
      weights(rank, T, K);
    } else if (job == "mt") {
      unsigned seed, n;
      in >> seed >> n;
      std::mt19937 gen(seed);
      std::vector<uint32_t> out(n);
      for (auto& v : out) v = static_cast<uint32_t>(gen());
      print_ints(out);
    } else if (job == "canonical") {
      unsigned seed, n;
      in >> seed >> n;
      std::mt19937 gen(seed);
      std::vector<float> out(n);
      for (auto& v : out) v = std::generate_canonical<float, 24>(gen);
      print_hex(out);
    } else if (job == "normal") {
      unsigned seed, n;
      in >> seed >> n;
      std::mt19937 gen(seed);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> out(n);
      for (auto& v : out) v = dist(gen);
      print_hex(out);
    } else if (job == "uniform") {
      unsigned seed, a, b, n;
      in >> seed >> a >> b >> n;
      std::mt19937 gen(seed);
      std::uniform_int_distribution<unsigned int> dist(a, b);
      std::vector<unsigned> out(n);
      for (auto& v : out) v = dist(gen);
      print_ints(out);
    } else if (job == "psort") {
      unsigned seed, n, k, m;
      in >> seed >> n >> k >> m;
      psort(seed, n, k, m);
    } else if (job == "logf") {
      unsigned first, step, n;
      in >> first >> step >> n;
      std::vector<float> out(n);
      for (unsigned i = 0; i < n; i++) {
        uint32_t b = first + i * step;
        float x;
        std::memcpy(&x, &b, sizeof x);
        volatile float vx = x;  // keep the call at run time, in libm
        out[i] = std::log(vx);
      }
      print_hex(out);
    } else {
      std::fprintf(stderr, "unknown job: %s\n", line.c_str());
      return 2;
    }
  }
  return 0;
}
