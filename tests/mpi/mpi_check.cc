// An MPI job that checks what it moves: point-to-point, collectives and one-sided; and timings
// (--pingpong: latency and bandwidth; --collectives: MPI_Allreduce and MPI_Alltoall;
// --put-flush: MPI_Put + MPI_Win_flush both ways at once).
// Run as `mpirun -np N vrnic run -- mpi_check`
// [--pingpong | --collectives | --put-flush | --seconds N].
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_rank = 0, g_size = 1, g_failures = 0;

void fail(const char* what, long at, long got, long want) {
  std::printf("rank %d: FAIL %s at %ld: got %ld, want %ld\n", g_rank, what, at, got, want);
  ++g_failures;
}

// The byte a sender `from` puts at offset i of a message of `len` to `to`.
uint8_t pattern(int from, int to, size_t len, size_t i) {
  return static_cast<uint8_t>((from * 131 + to * 17 + len * 7 + i * 29 + (i >> 8)) & 0xff);
}

// Every rank sends to the next and receives from the previous, at sizes that go eagerly and
// by rendezvous.
void ring() {
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  for (size_t len : {size_t{1}, size_t{8}, size_t{4000}, size_t{65536}, size_t{1} << 20,
                     size_t{4} << 20}) {
    std::vector<uint8_t> out(len), in(len, 0);
    for (size_t i = 0; i < len; ++i) out[i] = pattern(g_rank, next, len, i);
    MPI_Sendrecv(out.data(), int(len), MPI_BYTE, next, 7, in.data(), int(len), MPI_BYTE, prev, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (size_t i = 0; i < len; ++i)
      if (in[i] != pattern(prev, g_rank, len, i)) {
        fail("ring", long(i), in[i], pattern(prev, g_rank, len, i));
        break;
      }
  }
}

void allreduce() {
  const int n = 100000;
  std::vector<int64_t> v(n), sum(n);
  for (int i = 0; i < n; ++i) v[i] = int64_t{g_rank + 1} * i;
  MPI_Allreduce(v.data(), sum.data(), n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  const int64_t ranks = int64_t{g_size} * (g_size + 1) / 2;  // 1 + 2 + ... + size
  for (int i = 0; i < n; ++i)
    if (sum[i] != ranks * i) return fail("allreduce", i, long(sum[i]), long(ranks * i));
}

void alltoall() {
  const int per = 16384;
  std::vector<int32_t> out(size_t(per) * g_size), in(out.size());
  for (int to = 0; to < g_size; ++to)
    for (int i = 0; i < per; ++i) out[size_t(to) * per + i] = g_rank * 1000003 + to * 1009 + i;
  MPI_Alltoall(out.data(), per, MPI_INT32_T, in.data(), per, MPI_INT32_T, MPI_COMM_WORLD);
  for (int from = 0; from < g_size; ++from)
    for (int i = 0; i < per; ++i) {
      int32_t want = from * 1000003 + g_rank * 1009 + i;
      if (in[size_t(from) * per + i] != want)
        return fail("alltoall", from * per + i, in[size_t(from) * per + i], want);
    }
}

// MPI_Put into the next rank's window, MPI_Get from the previous one's, with fences and with
// passive-target locks.
void one_sided() {
  const int n = 1 << 18;  // 1 MiB of int32
  int32_t* base = nullptr;
  MPI_Win win;
  MPI_Win_allocate(MPI_Aint(n) * 4, 4, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  std::vector<int32_t> mine(n), got(n, -1);
  for (int i = 0; i < n; ++i) mine[i] = g_rank * 7919 + i;
  MPI_Win_fence(0, win);
  MPI_Put(mine.data(), n, MPI_INT32_T, next, 0, n, MPI_INT32_T, win);
  MPI_Win_fence(0, win);
  for (int i = 0; i < n; ++i)
    if (base[i] != prev * 7919 + i) {
      fail("put", i, base[i], prev * 7919 + i);
      break;
    }
  MPI_Win_lock(MPI_LOCK_SHARED, prev, 0, win);
  MPI_Get(got.data(), n, MPI_INT32_T, prev, 0, n, MPI_INT32_T, win);
  MPI_Win_unlock(prev, win);
  const int prev2 = (prev + g_size - 1) % g_size;  // what prev's window holds: its prev's data
  for (int i = 0; i < n; ++i)
    if (got[i] != prev2 * 7919 + i) {
      fail("get", i, got[i], prev2 * 7919 + i);
      break;
    }
  MPI_Win_fence(0, win);
  MPI_Win_free(&win);
}

// Ranks bounce messages in pairs (0 with 1, 2 with 3, ...; an odd last rank waits); rank 0
// prints its pair's half round trip and bandwidth.
void pingpong(size_t len, int iters) {
  std::vector<char> buf(len, 'x');
  const int peer = g_rank ^ 1;
  const bool paired = peer < g_size;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters && paired; ++i) {
    if (g_rank % 2 == 0) {
      MPI_Send(buf.data(), int(len), MPI_BYTE, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(buf.data(), int(len), MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf.data(), int(len), MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf.data(), int(len), MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    }
  }
  double half = (MPI_Wtime() - t0) / iters / 2;
  if (g_rank == 0)
    std::printf("pingpong %zu B: %.2f us, %.1f MB/s\n", len, half * 1e6, len / half / 1e6);
}

// Every rank runs the collective `iters` times on `len` bytes (int32 elements); rank 0
// prints the average time of one call. Timing only: the checks are allreduce() and alltoall().
void time_collective(const char* name, size_t len, int iters) {
  const bool a2a = std::strcmp(name, "alltoall") == 0;
  const int n = int(std::max<size_t>(len / sizeof(int32_t), 1));
  const int per = a2a ? std::max(n / g_size, 1) : n;  // alltoall: len in total per rank
  std::vector<int32_t> out(size_t(per) * (a2a ? g_size : 1), g_rank), in(out.size());
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    if (a2a)
      MPI_Alltoall(out.data(), per, MPI_INT32_T, in.data(), per, MPI_INT32_T, MPI_COMM_WORLD);
    else
      MPI_Allreduce(out.data(), in.data(), n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
  }
  const double each = (MPI_Wtime() - t0) / iters;
  if (g_rank == 0) std::printf("%s %zu B: %.2f us\n", name, len, each * 1e6);
}

void collectives() {
  for (const char* name : {"allreduce", "alltoall"}) {
    time_collective(name, 8, 5000);
    time_collective(name, 65536, 500);
    time_collective(name, size_t{1} << 20, 50);
  }
}

// Ranks in pairs put `len` bytes into each other's window and flush, both at once (a
// one-sided exchange: each waits for its own put's acknowledgement); rank 0 prints the time
// of one put + flush. Checked: after a barrier each window holds the peer's last put.
void put_flush(size_t len, int iters) {
  const int peer = g_rank ^ 1;
  uint8_t* base = nullptr;
  MPI_Win win;
  MPI_Win_allocate(MPI_Aint(len), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  std::vector<uint8_t> out(len);
  MPI_Win_lock_all(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters && peer < g_size; ++i) {
    out[0] = uint8_t(i);
    out[len - 1] = uint8_t(i * 7);
    MPI_Put(out.data(), int(len), MPI_BYTE, peer, 0, int(len), MPI_BYTE, win);
    MPI_Win_flush(peer, win);
  }
  const double each = (MPI_Wtime() - t0) / iters;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_sync(win);
  if (peer < g_size && (base[0] != uint8_t(iters - 1) || base[len - 1] != uint8_t((iters - 1) * 7)))
    fail("put-flush", long(len), base[0], uint8_t(iters - 1));
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  if (g_rank == 0) std::printf("put-flush %zu B: %.2f us\n", len, each * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  bool pp = argc > 1 && std::strcmp(argv[1], "--pingpong") == 0;
  bool coll = argc > 1 && std::strcmp(argv[1], "--collectives") == 0;
  bool put = argc > 1 && std::strcmp(argv[1], "--put-flush") == 0;
  // --seconds N: the checked rounds again and again for N seconds (rank 0's clock decides),
  // for the soak and for a rank killed in the middle of a job.
  const double seconds = argc > 2 && std::strcmp(argv[1], "--seconds") == 0 ? std::atof(argv[2]) : 0;
  if (pp) {
    pingpong(8, 10000);
    pingpong(size_t{1} << 20, 200);
  } else if (coll) {
    collectives();
  } else if (put) {
    put_flush(8, 2000);
    put_flush(65536, 500);
  } else {
    const double end = MPI_Wtime() + seconds;
    int more = 1, rounds = 0;
    while (more) {
      ring();
      allreduce();
      alltoall();
      one_sided();
      ++rounds;
      more = MPI_Wtime() < end;
      MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    if (g_rank == 0 && seconds > 0) std::printf("mpi_check: %d rounds\n", rounds);
  }
  int total = 0;
  MPI_Reduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("mpi_check %s: %d ranks, %d failures\n",
                               pp     ? "pingpong"
                               : coll ? "collectives"
                               : put  ? "put-flush"
                                      : "ring allreduce alltoall put get", g_size, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
