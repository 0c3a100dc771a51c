// `vrnic demo`: execs the demo script (share/vrnic/demo.py, installed or in the build tree).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/commands.h"

namespace vrnic::tools {

int cmd_demo(const std::vector<std::string>& args) {
  const std::string script = find_data_file("demo.py");
  if (script.empty()) {
    std::fprintf(stderr, "vrnic demo: demo.py not found in %s/../share/vrnic (reconfigure the "
                 "build tree, or reinstall the vrnic package)\n", self_dir().c_str());
    return 127;
  }
  std::vector<std::string> all = {"python3", script, "--vrnic", self_dir() + "/vrnic"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (const std::string& a : all) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp("python3", argv.data());
  std::fprintf(stderr, "vrnic demo: python3: %s (the demo needs python3, perftest and "
               "ibverbs-utils: apt install python3 perftest ibverbs-utils)\n",
               std::strerror(errno));
  return 127;
}

}  // namespace vrnic::tools
