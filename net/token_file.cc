// Why: see token_file.h.
#include "net/token_file.h"

#include <fstream>
#include <sstream>

namespace mixtrain::net {

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string token = text.str();
  const size_t begin = token.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return token.substr(begin, token.find_last_not_of(" \t\r\n") - begin + 1);
}

}  // namespace mixtrain::net
