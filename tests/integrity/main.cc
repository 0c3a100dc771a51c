// vrnic_integrity: an ordinary verbs program that checks every byte, CQE and atomic result.
//   vrnic_integrity server PORT SESSIONS ATOMIC_SESSIONS   (SESSIONS 0: until a client stops it)
//   vrnic_integrity client HOST PORT data|atomic|access|stop [THREADS ITERATIONS]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server.h"

int main(int argc, char** argv) {
  std::string role = argc > 1 ? argv[1] : "";
  if (role == "server" && argc == 5)
    return vrnic_test::run_server(static_cast<uint16_t>(atoi(argv[2])), atoi(argv[3]),
                                  atoi(argv[4]));
  if (role == "client" && argc >= 5)
    return vrnic_test::run_client(argv[2], static_cast<uint16_t>(atoi(argv[3])), argv[4],
                                  argc > 5 ? atoi(argv[5]) : 4, argc > 6 ? atoi(argv[6]) : 2000);
  fprintf(stderr,
          "usage: %s server PORT SESSIONS ATOMIC_SESSIONS\n"
          "       %s client HOST PORT data|atomic|access|stop [THREADS ITERATIONS]\n",
          argv[0], argv[0]);
  return 2;
}
