# syntax=docker/dockerfile:1
# edge-ai-bridge: build with the dev dependencies (tsc), run with the production ones only.
# One image runs the bridge (default CMD), the device simulator and the upstream simulator:
#   docker run IMAGE node dist/device-sim/cli.js --url mqtt://host:1883 …
#   docker run IMAGE node dist/upstream-sim/cli.js --host 0.0.0.0 --port 8080

# ---- build: TypeScript → dist/ (the build also copies bridge/store/lua and broker/lua) ----
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` builds, and the sources are not copied yet (better layer caching).
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY contract ./contract
COPY client ./client
COPY broker ./broker
COPY bridge ./bridge
COPY device-sim ./device-sim
COPY upstream-sim ./upstream-sim
COPY scada-sim ./scada-sim
COPY bench ./bench
RUN npm run build

# ---- runtime: production dependencies and dist/ only, as the unprivileged `node` user ----
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` runs the build, which needs tsc (a dev dependency); dist/ comes
# from the build stage. No production dependency needs its install script (cbor-extract's
# only looks for its prebuilt binary, an optional package npm installs anyway; without one
# cbor-x runs in plain JavaScript).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# In a container the listeners must leave loopback to be reachable (Prometheus, devices).
# MQTT_HOST 0.0.0.0 then needs AUTH_FILE (mount one) or ALLOW_ANONYMOUS=true: the bridge
# refuses to start otherwise — on purpose, this image does not opt in for you.
ENV MQTT_HOST=0.0.0.0 HTTP_HOST=0.0.0.0
USER node
EXPOSE 1883 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.HTTP_PORT||9464)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
CMD ["node", "dist/bridge/main.js"]
