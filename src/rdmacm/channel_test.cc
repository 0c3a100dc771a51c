// Tests of librdmacm's event channels: a pollable fd, EAGAIN when non-blocking, and a reader
// blocked while another thread destroys the channel.
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;

// A channel and an id on it resolving 127.0.0.1: its ADDR_RESOLVED (or ADDR_ERROR) follows.
void resolve_loopback(rdma_event_channel*& ch, rdma_cm_id*& id) {
  ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 1000), 0);
}

TEST(RdmacmChannel, get_cm_event__non_blocking_fd_with_nothing_queued__eagain) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* ev = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  pollfd p{ch->fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);  // nothing to read: not readable
  rdma_destroy_event_channel(ch);
}

TEST(RdmacmChannel, get_cm_event__event_of_a_destroyed_id__not_returned) {
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(resolve_loopback(ch, id));
  pollfd p{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);  // ADDR_RESOLVED (or ADDR_ERROR) is queued
  ASSERT_EQ(rdma_destroy_id(id), 0);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* ev = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);  // its event went with it
  EXPECT_EQ(errno, EAGAIN);
  rdma_destroy_event_channel(ch);
}

// An asynchronous program's fetched event is its own: rdma_destroy_id on another thread waits
// for the acknowledgement (rping's main thread destroying the id while its CM thread handles
// DISCONNECTED) and does not acknowledge (free) the event itself.
TEST(RdmacmChannel, destroy_id__event_fetched_by_another_thread__waits_for_its_ack) {
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(resolve_loopback(ch, id));
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
  EXPECT_EQ(ev->id, id);
  EXPECT_EQ(id->event, nullptr);  // kept only by synchronous ids
  std::atomic<bool> destroyed{false};
  std::thread destroyer([id, &destroyed] {
    EXPECT_EQ(rdma_destroy_id(id), 0);
    destroyed = true;
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(destroyed.load());
  EXPECT_EQ(ev->id, id);  // the event is still whole
  EXPECT_EQ(rdma_ack_cm_event(ev), 0);
  destroyer.join();
  EXPECT_TRUE(destroyed.load());
  rdma_destroy_event_channel(ch);
}

// As with the kernel's rdma_cm file, a thread blocked reading the channel stays blocked when
// another thread destroys it (rping's CM thread as the program exits): no EBADF, no event,
// and the fd number is not handed to the next file opened meanwhile.
TEST(RdmacmChannel, destroy__while_a_thread_is_blocked_in_get_cm_event__reader_stays_blocked) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  const int fd = ch->fd;
  std::atomic<bool> returned{false};
  std::thread reader([ch, &returned] {
    rdma_cm_event* ev = nullptr;
    rdma_get_cm_event(ch, &ev);
    returned = true;
  });
  std::this_thread::sleep_for(100ms);
  rdma_destroy_event_channel(ch);
  const int other = eventfd(0, EFD_CLOEXEC);
  EXPECT_NE(other, fd);
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(returned.load());
  close(other);
  reader.detach();
}

// A thread that calls rdma_get_cm_event just after another destroyed the channel (rping's
// CM thread looping back after its last event while the program exits) blocks as well,
// instead of failing with EBADF from a closed descriptor.
TEST(RdmacmChannel, get_cm_event_after_destroy__blocks_instead_of_ebadf) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_destroy_event_channel(ch);
  std::atomic<bool> returned{false};
  std::atomic<int> err{0};
  std::thread late([ch, &returned, &err] {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) err = errno;
    returned = true;
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(returned.load());
  EXPECT_EQ(err.load(), 0);
  late.detach();
}

}  // namespace
