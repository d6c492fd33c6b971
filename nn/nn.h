// Everything of tandem::nn: modules, layers, functionals, init.
#pragma once

#include "nn/functional/activation.h"
#include "nn/functional/conv.h"
#include "nn/functional/linear.h"
#include "nn/functional/norm.h"
#include "nn/init.h"
#include "nn/module.h"
#include "nn/modules/activation.h"
#include "nn/modules/container.h"
#include "nn/modules/conv.h"
#include "nn/modules/embedding.h"
#include "nn/modules/linear.h"
#include "nn/modules/norm.h"
#include "nn/modules/pool.h"
