export { createAppLogic } from './app-logic.js';
export { APP_TABLES, DETECTIONS, FRAMES, RECOGNITIONS, EVENTS } from './tables.js';
export * from './operators/index.js';
