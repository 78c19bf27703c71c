// Why: loss scales appear in errors and overflow reports, where 65536 must
// read "65536" (not "65536.000000" or "6.5536e+04") and any other value
// must print exactly enough digits to be read back.
#pragma once

#include <string>

namespace mixtrain {

// The shortest decimal text that reads back as `scale` ("65536", "0.5",
// "1e+20", "inf").
std::string format_scale(float scale);

}  // namespace mixtrain
