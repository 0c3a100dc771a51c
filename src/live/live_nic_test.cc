// Tests of the live device: singleton and refcount, addresses across processes, counters file.
#include "live/live_nic.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "live/counters_file.h"

namespace vrnic::live {
namespace {

class LiveNicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("VRNIC_IP");
    unsetenv("VRNIC_PCAP");
    unsetenv("VRNIC_FAULTS");
  }
};

TEST_F(LiveNicTest, acquire__twice_is_one_device_with_a_refcount) {
  int err = 0;
  LiveNic* a = LiveNic::acquire({}, err);
  ASSERT_NE(a, nullptr) << std::strerror(err);
  LiveNic* b = LiveNic::acquire({}, err);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a->name(), "vrnic0");
  LiveNic::release(b);
  // Still open: the counters file is there until the last release.
  std::string path = a->counters_path();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  LiveNic::release(a);
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST_F(LiveNicTest, acquire__gid_is_the_ipv4_mapped_address) {
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr);
  EXPECT_FALSE(nic->is_ipv6());
  EXPECT_TRUE(nic->gid().is_ipv4_mapped());
  const auto& g = nic->gid().raw;
  char expect[32];
  std::snprintf(expect, sizeof expect, "%u.%u.%u.%u", g[12], g[13], g[14], g[15]);
  EXPECT_EQ(nic->ip_string(), expect);
  EXPECT_EQ(g[12], 127);
  LiveNic::release(nic);
}

TEST_F(LiveNicTest, acquire__two_processes_get_different_addresses) {
  int up[2], go[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int err = 0;
    LiveNic* nic = LiveNic::acquire({}, err);
    char ip[64] = {};
    if (nic) std::snprintf(ip, sizeof ip, "%s", nic->ip_string().c_str());
    (void)!write(up[1], ip, sizeof ip);
    char c;
    (void)!read(go[0], &c, 1);  // keep the device until the parent has its own
    if (nic) LiveNic::release(nic);
    _exit(nic ? 0 : 1);
  }
  char child_ip[64] = {};
  ASSERT_EQ(read(up[0], child_ip, sizeof child_ip), static_cast<ssize_t>(sizeof child_ip));
  ASSERT_NE(child_ip[0], 0) << "child could not open the device";
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr);
  EXPECT_NE(nic->ip_string(), child_ip);
  // Both are listed by `vrnic stats` while they run.
  EXPECT_EQ(read_all_counters(child).size(), 1u);
  EXPECT_EQ(read_all_counters(getpid()).size(), 1u);
  (void)!write(go[1], "x", 1);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(read_all_counters(child).empty());  // the child removed its file
  LiveNic::release(nic);
}

TEST_F(LiveNicTest, acquire__vrnic_ip_is_used) {
  setenv("VRNIC_IP", "127.0.0.249", 1);
  int err = 0;
  LiveNic* nic = LiveNic::acquire({}, err);
  ASSERT_NE(nic, nullptr) << std::strerror(err);
  EXPECT_EQ(nic->ip_string(), "127.0.0.249");
  EXPECT_EQ(nic->gid().raw[15], 249);
  LiveNic::release(nic);
}

TEST_F(LiveNicTest, acquire__bad_vrnic_ip_fails_with_einval) {
  setenv("VRNIC_IP", "not.an.address", 1);
  int err = 0;
  EXPECT_EQ(LiveNic::acquire({}, err), nullptr);
  EXPECT_EQ(err, EINVAL);
}

TEST_F(LiveNicTest, acquire__bad_vrnic_faults_fails_with_einval) {
  setenv("VRNIC_FAULTS", "loss=7", 1);
  int err = 0;
  EXPECT_EQ(LiveNic::acquire({}, err), nullptr);
  EXPECT_EQ(err, EINVAL);
}

TEST_F(LiveNicTest, exit__without_release_removes_the_counters_file) {
  int up[2];
  ASSERT_EQ(pipe(up), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int err = 0;
    LiveNic* nic = LiveNic::acquire({}, err);
    char path[128] = {};
    if (nic) std::snprintf(path, sizeof path, "%s", nic->counters_path().c_str());
    (void)!write(up[1], path, sizeof path);
    std::exit(0);  // programs often exit with the device open
  }
  char path[128] = {};
  ASSERT_EQ(read(up[0], path, sizeof path), static_cast<ssize_t>(sizeof path));
  ASSERT_NE(path[0], 0);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);  // no hang, no crash
  EXPECT_NE(access(path, F_OK), 0);
}

}  // namespace
}  // namespace vrnic::live
