/**
 * The routing engine: pure functions and data, no I/O. Parses and validates `routes` rows, compiles them
 * into a RouteTable and answers which target takes a message (docs/ROUTING.md, layer 4).
 */
export {
  compileGlob,
  globError,
  isLiteral,
  MAX_GLOB_CHARS,
  MAX_GLOB_WILDCARDS,
  tryCompileGlob,
  type GlobTest,
} from './glob.js';
export { DEFAULT_IMPULSE, parseImpulseConfig, weightOf, type ImpulseConfig } from './impulse.js';
export { MATCH_KEYS, parseMatch, type MatchKey, type Predicate } from './match.js';
export {
  checkRoute,
  compileRoutes,
  RouteTable,
  type ExplainLine,
  type InvalidRoute,
  type Resolution,
  type Route,
  type RouteProblem,
  type RouteRow,
} from './table.js';
export { formatTarget, parseTarget, type Target } from './target.js';
export { explainFields, formatExplain } from './explain.js';
