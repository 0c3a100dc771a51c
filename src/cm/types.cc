// Names of the CM's states and events, for logs and tests.
#include "cm/types.h"

namespace vrnic::cm {

const char* to_string(State s) {
  switch (s) {
    case State::kIdle: return "IDLE";
    case State::kReqSent: return "REQ_SENT";
    case State::kMraReqRcvd: return "MRA_REQ_RCVD";
    case State::kReqRcvd: return "REQ_RCVD";
    case State::kMraReqSent: return "MRA_REQ_SENT";
    case State::kRepSent: return "REP_SENT";
    case State::kRepRcvd: return "REP_RCVD";
    case State::kEstablished: return "ESTABLISHED";
    case State::kDreqSent: return "DREQ_SENT";
    case State::kDreqRcvd: return "DREQ_RCVD";
    case State::kTimewait: return "TIMEWAIT";
    case State::kSidrReqSent: return "SIDR_REQ_SENT";
    case State::kSidrReqRcvd: return "SIDR_REQ_RCVD";
    case State::kClosed: return "CLOSED";
  }
  return "?";
}

const char* to_string(EventType t) {
  switch (t) {
    case EventType::kConnectRequest: return "CONNECT_REQUEST";
    case EventType::kConnectResponse: return "CONNECT_RESPONSE";
    case EventType::kEstablished: return "ESTABLISHED";
    case EventType::kRejected: return "REJECTED";
    case EventType::kUnreachable: return "UNREACHABLE";
    case EventType::kDisconnected: return "DISCONNECTED";
    case EventType::kTimewaitExit: return "TIMEWAIT_EXIT";
  }
  return "?";
}

}  // namespace vrnic::cm
