// vrnic_pcap_check FILE...: reads captures (VRNIC_PCAP) and verifies every frame: Ethernet/IP/
// UDP 4791, a parseable BTH, and a correct ICRC. Prints counts; exits 1 on any bad frame.
#include <cstdio>
#include <cstring>
#include <vector>

#include "wire/frame.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"

namespace {

struct Tally {
  size_t frames = 0, bad = 0;
  size_t by_opcode[256] = {};
};

bool check_file(const char* path, Tally& t) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return false;
  }
  uint8_t gh[24];
  if (fread(gh, 1, 24, f) != 24) {
    fprintf(stderr, "%s: no pcap header\n", path);
    fclose(f);
    return false;
  }
  uint32_t magic;
  memcpy(&magic, gh, 4);
  uint32_t linktype;
  memcpy(&linktype, gh + 20, 4);
  if ((magic != 0xa1b2c3d4 && magic != 0xa1b23c4d) || linktype != 1) {
    fprintf(stderr, "%s: not a little-endian Ethernet pcap\n", path);
    fclose(f);
    return false;
  }
  uint8_t rh[16];
  std::vector<uint8_t> frame;
  while (fread(rh, 1, 16, f) == 16) {
    uint32_t incl;
    memcpy(&incl, rh + 8, 4);
    frame.resize(incl);
    if (fread(frame.data(), 1, incl, f) != incl) break;
    ++t.frames;
    vrnic::wire::IpUdpInfo ip;
    auto udp = vrnic::wire::parse_frame(frame, ip);
    vrnic::wire::Packet p;
    const char* why = nullptr;
    if (udp.empty() || ip.dst_port != vrnic::wire::kRoceV2Port) why = "not UDP 4791";
    else if (vrnic::wire::parse_packet(udp, p) != vrnic::wire::ParseError::kOk) why = "BTH does not parse";
    else if (vrnic::wire::verify_icrc(ip, udp) != vrnic::wire::IcrcVerdict::kOk) why = "ICRC wrong";
    if (why) {
      ++t.bad;
      fprintf(stderr, "%s: frame %zu: %s\n", path, t.frames, why);
    } else {
      t.by_opcode[p.bth.opcode]++;
    }
  }
  fclose(f);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Tally t;
  bool ok = argc > 1;
  for (int i = 1; i < argc; ++i) ok &= check_file(argv[i], t);
  printf("frames %zu, bad %zu\n", t.frames, t.bad);
  for (int op = 0; op < 256; ++op)
    if (t.by_opcode[op])
      printf("  %-28s %zu\n", vrnic::wire::opcode_info(static_cast<uint8_t>(op)).name, t.by_opcode[op]);
  return ok && t.bad == 0 && t.frames > 0 ? 0 : 1;
}
