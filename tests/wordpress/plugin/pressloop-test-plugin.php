<?php
/**
 * Plugin Name: Pressloop Test Plugin
 * Description: A one-file plugin for Pressloop's tests: list, activate, deactivate, delete.
 * Version: 1.0.0
 * Author: Pressloop
 * License: MIT
 */

// While active, every REST answer carries a header, so a test can see the plugin at work.
add_filter('rest_post_dispatch', function ($response) {
    $response->header('X-Pressloop-Test-Plugin', 'active');
    return $response;
});
