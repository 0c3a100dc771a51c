// The process's link to its CM guard (src/guard): the established connections' DREQs, kept outside the process.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "cm/manager.h"

namespace vrnic::rdmacm {

// The kernel's CM ends the connections of a process that is killed (a DREQ for each); vrnic's
// CM dies with its process. This Witness starts vrnic-guard on the first established
// connection and tells it, over a socket pair, each connection's DREQ and when it is no
// longer owed; the guard sends those still owed once the stream ends (the process has gone).
class GuardLink final : public cm::Witness {
 public:
  // VRNIC_CM_GUARD names the guard program (`vrnic run` sets it); null if unset, "" or "0".
  static std::unique_ptr<GuardLink> from_env();
  explicit GuardLink(std::string program) : program_(std::move(program)) {}
  ~GuardLink() override;

  void keep(uint32_t conn, const cm::Endpoint& from, const cm::Endpoint& to,
            std::span<const uint8_t, wire::cm::kMadSize> dreq) override;
  void drop(uint32_t conn) override;

 private:
  bool start();  // spawns the guard; false (once, with a message) if it cannot
  void write_record(const uint8_t* data, size_t n);

  std::string program_;
  int fd_ = -1;          // this process's end of the pair (close-on-exec)
  bool failed_ = false;  // the guard could not be started: no more tries
  std::set<uint32_t> kept_;
};

}  // namespace vrnic::rdmacm
