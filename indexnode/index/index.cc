#include "indexnode/index/index.h"
