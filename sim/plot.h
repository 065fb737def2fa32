// kfsim --plot: analysis/plot.py over records just written (PNG + PDF beside them), run by
// /usr/bin/python3 (Debian's python3-matplotlib). The script is found above the executable
// (build/<dir>/apps/kfsim -> analysis/plot.py) or in $KF_ANALYSIS_DIR.
#pragma once

#include <string>

namespace kf {

// 0 when the plots were made; 1 (with a message on stderr naming what is missing) otherwise.
int plot_records(const std::string& out, bool quiet);

}  // namespace kf
