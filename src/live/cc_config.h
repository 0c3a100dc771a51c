// VRNIC_CC: congestion control parameters by their NVIDIA names ("rpg_time_reset=300,...").
#pragma once
#include <string>

#include "engine/dcqcn.h"

namespace vrnic::live {

// Applies a comma-separated list of name=value to p; false with a message on an unknown
// name or a value out of range (p is then left as it was). Names and units as NVIDIA's
// NICs take them (docs/live.md "Congestion control").
bool parse_cc_spec(const std::string& spec, engine::DcqcnParams& p, std::string& error);

}  // namespace vrnic::live
