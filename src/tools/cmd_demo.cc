// `vrnic demo`: execs the demo script installed beside the vrnic executable.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/commands.h"

namespace vrnic::tools {

int cmd_demo(const std::vector<std::string>& args) {
  const std::string dir = self_dir();
  const std::string script = dir + "/vrnic-demo.py";
  if (access(script.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "vrnic demo: %s not found (rebuild the vrnic target)\n", script.c_str());
    return 127;
  }
  std::vector<std::string> all = {"python3", script, "--vrnic", dir + "/vrnic"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (const std::string& a : all) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp("python3", argv.data());
  std::fprintf(stderr, "vrnic demo: python3: %s\n", std::strerror(errno));
  return 127;
}

}  // namespace vrnic::tools
