// Importing a context (ibv_import_device on a dup of cmd_fd) and its PD, MR and device memory
// by handle: traffic through the imported objects, the errnos of rdma-core v44 with mlx5.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <numeric>

#include "abi/verbs_test.h"

namespace vrnic::abi::test {
namespace {

bool fd_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

class Import : public Loopback {
 protected:
  void SetUp() override {
    Loopback::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_GE(ctx_->cmd_fd, 0);
    dup_fd_ = dup(ctx_->cmd_fd);
    ASSERT_GE(dup_fd_, 0);
    ctx2_ = ibv_import_device(dup_fd_);
    ASSERT_NE(ctx2_, nullptr) << std::strerror(errno);
  }
  void TearDown() override {
    if (ctx2_) {
      EXPECT_EQ(ibv_close_device(ctx2_), 0);
    }
    Loopback::TearDown();
  }
  // An RC QP of ctx2 on `pd`, with its own CQ.
  ibv_qp* qp2(ibv_pd* pd, ibv_cq* cq) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    return ibv_create_qp(pd, &init);
  }
  static std::vector<ibv_wc> poll(ibv_cq* cq, int n) {
    std::vector<ibv_wc> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (int(out.size()) < n && std::chrono::steady_clock::now() < deadline) {
      ibv_wc wc;
      if (ibv_poll_cq(cq, 1, &wc) == 1) out.push_back(wc);
    }
    return out;
  }
  int dup_fd_ = -1;
  ibv_context* ctx2_ = nullptr;
};

TEST_F(Import, cmd_fd__is_a_character_device_that_dups) {
  struct stat st, st2;
  ASSERT_EQ(fstat(ctx_->cmd_fd, &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_NE(fcntl(ctx_->cmd_fd, F_GETFD) & FD_CLOEXEC, 0);  // not leaked into exec'd programs
  ASSERT_EQ(fstat(dup_fd_, &st2), 0);
  EXPECT_EQ(st2.st_rdev, st.st_rdev);
  // The imported context owns the descriptor it was given.
  EXPECT_EQ(ctx2_->cmd_fd, dup_fd_);
  EXPECT_EQ(ctx2_->device, ctx_->device);
  ibv_device_attr a{}, b{};
  ASSERT_EQ(ibv_query_device(ctx_, &a), 0);
  ASSERT_EQ(ibv_query_device(ctx2_, &b), 0);
  EXPECT_EQ(a.node_guid, b.node_guid);
  EXPECT_EQ(ibv_close_device(ctx2_), 0);
  ctx2_ = nullptr;
  EXPECT_FALSE(fd_open(dup_fd_));  // closed with its context
  EXPECT_TRUE(fd_open(ctx_->cmd_fd));
}

// The shared PD: ctx2's QPs run on the imported PD and move bytes between the imported MRs
// (keys and handles the originals'); a QP of another PD of ctx2 is refused those keys.
TEST_F(Import, pd_and_mr__traffic_through_the_imported_objects) {
  ibv_pd* pd2 = ibv_import_pd(ctx2_, pd_->handle);
  ASSERT_NE(pd2, nullptr) << std::strerror(errno);
  EXPECT_EQ(pd2->handle, pd_->handle);
  EXPECT_EQ(pd2->context, ctx2_);
  ibv_mr* a2 = ibv_import_mr(pd2, a_mr_->handle);
  ibv_mr* b2 = ibv_import_mr(pd2, b_mr_->handle);
  ASSERT_NE(a2, nullptr) << std::strerror(errno);
  ASSERT_NE(b2, nullptr) << std::strerror(errno);
  EXPECT_EQ(a2->handle, a_mr_->handle);
  EXPECT_EQ(a2->lkey, a_mr_->lkey);
  EXPECT_EQ(a2->rkey, a_mr_->rkey);
  EXPECT_EQ(a2->length, a_mr_->length);
  EXPECT_EQ(a2->addr, nullptr);  // as rdma-core's ibv_cmd_query_mr leaves it
  EXPECT_EQ(a2->pd, pd2);
  ibv_cq* cq = ibv_create_cq(ctx2_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* c = qp2(pd2, cq);
  ibv_qp* d = qp2(pd2, cq);
  ASSERT_NE(c, nullptr);
  ASSERT_NE(d, nullptr);
  connect_rc(c, d->qp_num);
  connect_rc(d, c->qp_num);
  std::iota(a_buf_.begin(), a_buf_.begin() + 256, uint8_t(3));
  ibv_sge rs{reinterpret_cast<uint64_t>(b_buf_.data()), 256, b2->lkey};
  ibv_recv_wr rw{.wr_id = 1, .next = nullptr, .sg_list = &rs, .num_sge = 1};
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(d, &rw, &bad_r), 0);
  ibv_sge s{reinterpret_cast<uint64_t>(a_buf_.data()), 256, a2->lkey};
  ibv_send_wr w{};
  w.wr_id = 2;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  w.sg_list = &s;
  w.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(c, &w, &bad), 0);
  // An RDMA WRITE through the original MR's rkey, from the imported one.
  ibv_send_wr wr = w;
  wr.wr_id = 3;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(b_buf_.data()) + 4096;
  wr.wr.rdma.rkey = b_mr_->rkey;
  ASSERT_EQ(ibv_post_send(c, &wr, &bad), 0);
  auto wcs = poll(cq, 3);
  ASSERT_EQ(wcs.size(), 3u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc.wr_id;
  EXPECT_TRUE(std::equal(a_buf_.begin(), a_buf_.begin() + 256, b_buf_.begin()));
  EXPECT_TRUE(std::equal(a_buf_.begin(), a_buf_.begin() + 256, b_buf_.begin() + 4096));

  // Another PD of ctx2 does not protect the imported MR: its QP gets a protection error.
  ibv_pd* other = ibv_alloc_pd(ctx2_);
  ASSERT_NE(other, nullptr);
  ibv_qp* e = qp2(other, cq);
  ASSERT_NE(e, nullptr);
  connect_rc(e, d->qp_num);
  ASSERT_EQ(ibv_post_send(e, &wr, &bad), 0);
  wcs = poll(cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_PROT_ERR);

  for (ibv_qp* q : {c, d, e}) EXPECT_EQ(ibv_destroy_qp(q), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
  ibv_unimport_mr(a2);
  ibv_unimport_mr(b2);
  ibv_unimport_pd(pd2);
  // The originals are untouched by the unimports.
  ibv_sge s0 = sge(a_buf_, a_mr_, 0, 64);
  ibv_send_wr w0 = rdma_to_b(IBV_WR_RDMA_WRITE, 4, &s0, b_mr_->rkey);
  ASSERT_EQ(ibv_post_send(a_, &w0, &bad), 0);
  wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
}

// Objects made in the imported context are the file's too: the first context imports them.
TEST_F(Import, objects_of_the_imported_context__import_back) {
  ibv_pd* pd2 = ibv_alloc_pd(ctx2_);
  ASSERT_NE(pd2, nullptr);
  EXPECT_NE(pd2->handle, pd_->handle);
  ibv_pd* back = ibv_import_pd(ctx_, pd2->handle);
  ASSERT_NE(back, nullptr) << std::strerror(errno);
  std::vector<uint8_t> buf(4096);
  ibv_mr* mr = ibv_reg_mr(back, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(pd2), EBUSY);  // the MR made through the import holds it
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  ibv_unimport_pd(back);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

// uverbs' lookup by handle: ENOENT for a handle that names nothing, EINVAL for one of another
// kind. A context opened on its own (another command file) sees none of the handles.
TEST_F(Import, import_by_handle__enoent_and_einval) {
  constexpr uint32_t kNone = 0x7ffffff0;
  struct Case {
    const char* what;
    std::function<void*()> import;
    int err;
  };
  ibv_context* own = ibv_open_device(list_[0]);
  ASSERT_NE(own, nullptr);
  const Case cases[] = {
      {"pd: no such handle", [&] { return (void*)ibv_import_pd(ctx2_, kNone); }, ENOENT},
      {"pd: an MR's handle", [&] { return (void*)ibv_import_pd(ctx2_, a_mr_->handle); }, EINVAL},
      {"mr: a PD's handle", [&] { return (void*)ibv_import_mr(pd_, pd_->handle); }, EINVAL},
      {"mr: no such handle", [&] { return (void*)ibv_import_mr(pd_, kNone); }, ENOENT},
      {"dm: a PD's handle", [&] { return (void*)ibv_import_dm(ctx2_, pd_->handle); }, EINVAL},
      {"dm: no such handle", [&] { return (void*)ibv_import_dm(ctx2_, kNone); }, ENOENT},
      {"pd: another file's", [&] { return (void*)ibv_import_pd(own, pd_->handle); }, ENOENT},
  };
  for (const Case& c : cases) {
    errno = 0;
    EXPECT_EQ(c.import(), nullptr) << c.what;
    EXPECT_EQ(errno, c.err) << c.what;
  }
  EXPECT_EQ(ibv_close_device(own), 0);
}

// Importing twice gives two handles of one PD; ibv_dealloc_pd through any handle destroys it
// (then the handle names nothing: ENOENT for the others), ibv_unimport_pd frees only its own.
TEST_F(Import, twice__and_dealloc_through_an_import) {
  ibv_pd* p = ibv_alloc_pd(ctx_);
  ASSERT_NE(p, nullptr);
  ibv_pd* i1 = ibv_import_pd(ctx2_, p->handle);
  ibv_pd* i2 = ibv_import_pd(ctx2_, p->handle);
  ASSERT_NE(i1, nullptr);
  ASSERT_NE(i2, nullptr);
  EXPECT_NE(i1, i2);
  ibv_unimport_pd(i1);
  EXPECT_EQ(ibv_dealloc_pd(i2), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(ctx2_, p->handle), nullptr);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(ibv_dealloc_pd(p), ENOENT);  // destroyed through the import
  ibv_unimport_pd(p);                     // what is left to do with the original handle
  // The same for an MR: dereg through the import; the original's keys are gone.
  ibv_mr* m2 = ibv_import_mr(pd_, a_mr_->handle);
  ASSERT_NE(m2, nullptr);
  EXPECT_EQ(ibv_dereg_mr(m2), 0);
  EXPECT_EQ(ibv_dereg_mr(a_mr_), ENOENT);
  ibv_sge s{reinterpret_cast<uint64_t>(a_buf_.data()), 64, a_mr_->lkey};
  ibv_unimport_mr(a_mr_);
  a_mr_ = nullptr;
  ibv_send_wr w = rdma_to_b(IBV_WR_RDMA_WRITE, 5, &s, b_mr_->rkey);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_, &w, &bad), 0);
  auto wcs = wait(1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_PROT_ERR);
}

// Device memory and a DM MR on it, shared the same way: the imported handle reads what the
// original wrote, the imported MR has the original's keys and holds the block.
TEST_F(Import, dm_and_dm_mr__shared) {
  ibv_alloc_dm_attr attr{};
  attr.length = 4096;
  ibv_dm* dm = ibv_alloc_dm(ctx_, &attr);
  ASSERT_NE(dm, nullptr);
  std::vector<uint8_t> in(64), out(64);
  std::iota(in.begin(), in.end(), uint8_t(9));
  ASSERT_EQ(ibv_memcpy_to_dm(dm, 128, in.data(), in.size()), 0);
  ibv_dm* dm2 = ibv_import_dm(ctx2_, dm->handle);
  ASSERT_NE(dm2, nullptr) << std::strerror(errno);
  EXPECT_EQ(dm2->handle, dm->handle);
  EXPECT_EQ(dm2->context, ctx2_);
  ASSERT_EQ(ibv_memcpy_from_dm(out.data(), dm2, 128, out.size()), 0);
  EXPECT_EQ(out, in);
  ibv_mr* mr = ibv_reg_dm_mr(pd_, dm, 0, 1024, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_mr* mr2 = ibv_import_mr(pd_, mr->handle);
  ASSERT_NE(mr2, nullptr);
  EXPECT_EQ(mr2->lkey, mr->lkey);
  EXPECT_EQ(mr2->length, 1024u);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_free_dm(dm2), 0) << "only the deregistered MR was on it";
  ibv_unimport_mr(mr2);
  errno = 0;
  EXPECT_EQ(ibv_import_dm(ctx2_, dm->handle), nullptr);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(ibv_free_dm(dm), ENOENT);  // freed through the import
  ibv_unimport_dm(dm);
}

// What the descriptor must be: a character device (EINVAL), of this device (ENODEV; the
// descriptor stays the caller's), and a command fd of a context: a node of the device opened
// by the program is EINVAL, and it is closed, as rdma-core's provider does once it took it.
TEST_F(Import, import_device__what_the_fd_must_be) {
  errno = 0;
  EXPECT_EQ(ibv_import_device(-1), nullptr);
  EXPECT_EQ(errno, EINVAL);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(p[0]), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_TRUE(fd_open(p[0]));
  close(p[0]);
  close(p[1]);
  const int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(zero, 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(zero), nullptr);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_TRUE(fd_open(zero));
  close(zero);
  struct stat st;
  ASSERT_EQ(fstat(ctx_->cmd_fd, &st), 0);
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", ctx_->cmd_fd);
  const int fresh = open(path, O_RDWR | O_CLOEXEC);  // the same node, another description
  ASSERT_GE(fresh, 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(fresh), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FALSE(fd_open(fresh));
}

// Contexts of one file close in any order: the objects stay while one context is open.
TEST_F(Import, original_closes_first__imported_context_keeps_the_objects) {
  ibv_context* first = ibv_open_device(list_[0]);
  ASSERT_NE(first, nullptr);
  ibv_pd* pd = ibv_alloc_pd(first);
  ASSERT_NE(pd, nullptr);
  ibv_context* second = ibv_import_device(dup(first->cmd_fd));
  ASSERT_NE(second, nullptr);
  ibv_pd* pd2 = ibv_import_pd(second, pd->handle);
  ASSERT_NE(pd2, nullptr);
  ibv_unimport_pd(pd);
  EXPECT_EQ(ibv_close_device(first), 0);
  std::vector<uint8_t> buf(4096);
  ibv_mr* mr = ibv_reg_mr(pd2, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
  EXPECT_EQ(ibv_close_device(second), 0);
}

}  // namespace
}  // namespace vrnic::abi::test
