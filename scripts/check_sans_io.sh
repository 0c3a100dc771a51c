#!/usr/bin/env bash
# The engine and wire layers are sans-IO: no system call, clock, thread or socket. Checked
# twice: (1) the undefined symbols of the built static libraries (what their code calls)
# against a list of system-call wrappers and clock / thread / socket / file functions;
# (2) their sources (test, fuzz and benchmark files and test helpers excepted) against
# includes of system headers and clock reads. Run by ctest as layers.sans_io.
#   check_sans_io.sh <nm> <src dir> <layer>:<library.a>...
set -uo pipefail
NM=$1 SRC=$2
shift 2
fail=0
LAYERS=() LIBS=()
for arg in "$@"; do
  LAYERS+=("${arg%%:*}")
  LIBS+=("${arg#*:}")
done
[ ${#LAYERS[@]} -gt 0 ] || { echo "no layer given"; exit 1; }

# (1) Symbols. Matched whole against the demangled name; C names may carry the
# _FORTIFY_SOURCE (__x_chk) or large-file (x64) forms.
c_calls='socket|socketpair|bind|listen|accept4?|connect|shutdown|send|sendto|sendmsg|sendmmsg|'\
'recv|recvfrom|recvmsg|recvmmsg|getsockopt|setsockopt|getsockname|getpeername|getaddrinfo|'\
'read|write|pread|pwrite|readv|writev|preadv|pwritev|open|openat|creat|close|dup|dup2|dup3|'\
'pipe|pipe2|poll|ppoll|select|pselect|epoll_create1?|epoll_ctl|epoll_wait|epoll_pwait|'\
'eventfd|timerfd_create|timerfd_settime|signalfd|ioctl|fcntl|syscall|lseek|fstat|stat|lstat|'\
'mmap|munmap|mprotect|madvise|mincore|mlock|munlock|msync|mremap|memfd_create|'\
'shm_open|shm_unlink|ftruncate|unlink|rename|mkdir|'\
'process_vm_readv|process_vm_writev|pidfd_open|ptrace|'\
'fork|vfork|clone|execve|execvp|execv|waitpid|wait|kill|raise|signal|sigaction|sigprocmask|'\
'getpid|getppid|gettid|getuid|geteuid|sysconf|getpagesize|getrlimit|setrlimit|sched_yield|'\
'clock_gettime|clock_nanosleep|gettimeofday|time|nanosleep|usleep|sleep|alarm|'\
'pthread_[a-z_]+|thrd_[a-z_]+|'\
'getenv|secure_getenv|getrandom|rand|random|srand|randombytes_[a-z_]+|sodium_init|'\
'fopen|fdopen|freopen|fclose|fread|fwrite|fflush|fprintf|printf|vfprintf|vprintf|puts|fputs|'\
'perror|putchar|fputc|dlopen|dlsym'
cxx_calls='std::thread::.*|std::this_thread::.*|std::chrono::.*_clock::now\(\)|'\
'std::random_device::.*|std::basic_[io]?fstream.*|std::basic_filebuf.*|std::filesystem::.*|'\
'std::cout|std::cerr|std::clog|std::cin|std::condition_variable::.*|std::mutex::.*'
deny="^((__)?($c_calls)(64)?(_chk)?|$cxx_calls)\$"
for lib in "${LIBS[@]}"; do
  if [ ! -f "$lib" ]; then echo "FAIL: $lib not built"; fail=1; continue; fi
  # nm -A: archive:member: symbol; -u undefined only; -C demangled.
  hits=$("$NM" -A -u -C "$lib" | sed -E 's/^([^ ]*) +U +/\1 /' |
         awk -v re="$deny" '{ sym = $0; sub(/^[^ ]* /, "", sym); sub(/@.*/, "", sym); if (sym ~ re) print }')
  n=$("$NM" -u "$lib" | awk '$1 == "U" { print $2 }' | sort -u | wc -l)
  if [ -n "$hits" ]; then
    echo "FAIL: $(basename "$lib") calls what the sans-IO layers must not:"
    echo "$hits" | sed 's/^/  /'
    fail=1
  else
    echo "ok: $(basename "$lib"): none of its $n undefined symbols is a system call, clock, thread or socket"
  fi
done

# (2) Sources of the library code: no system header, no clock read.
exempt='(_test\.cc|_fuzz\.cc|_benchmark\.cc|/test_[a-z_]*\.h|/vectors_reader\.h)$'
headers='#[[:space:]]*include[[:space:]]*<(sys/[^>]*|unistd\.h|fcntl\.h|poll\.h|signal\.h|csignal|'\
'time\.h|ctime|pthread\.h|thread|mutex|shared_mutex|condition_variable|future|semaphore|'\
'stop_token|netinet/[^>]*|arpa/[^>]*|netdb\.h|net/[^>]*|linux/[^>]*|dlfcn\.h|fstream|'\
'iostream|filesystem)>'
clocks='(steady_clock|system_clock|high_resolution_clock|file_clock|utc_clock)'
for layer in "${LAYERS[@]}"; do
  files=$(find "$SRC/$layer" -name '*.cc' -o -name '*.h' | grep -Ev "$exempt" | LC_ALL=C sort)
  hits=$(grep -nE "$headers|$clocks" $files /dev/null | sed "s|^$SRC/||")
  if [ -n "$hits" ]; then
    echo "FAIL: src/$layer includes a system header or reads a clock:"
    echo "$hits" | sed 's/^/  /'
    fail=1
  else
    echo "ok: src/$layer: $(echo "$files" | wc -l) source files, no system header or clock"
  fi
done
exit $fail
