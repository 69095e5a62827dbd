export * from './schema.js';
export * from './deployment-schema.js';
export { configError, loadConfigFile, parseConfig, deepFreeze, type ConfigIssue } from './load.js';
export * from './compile.js';
export { matchesId } from './source-pattern.js';
export * from './json-schema.js';
export { paramsIssues, type ParamsRules, type ParamsRulesByArchitecture } from './params.js';
